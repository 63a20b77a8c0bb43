resource "kubernetes_service_v1" "public" {
  metadata {
    name = "public-api"
    annotations = {
      "service.beta.kubernetes.io/aws-load-balancer-type" = "nlb"
    }
  }

  spec {
    type                    = "LoadBalancer"
    external_traffic_policy = "Local"
    selector = {
      app = "api"
    }

    port {
      port        = 443
      target_port = "8443"
      protocol    = "TCP"
    }
  }
}
