resource "kubernetes_service_v1" "api" {
  metadata {
    name = "api"
  }

  spec {
    type = "ClusterIP"
    selector = {
      app = "api"
    }

    port {
      name        = "http"
      port        = 80
      target_port = "8080"
    }
  }
}
