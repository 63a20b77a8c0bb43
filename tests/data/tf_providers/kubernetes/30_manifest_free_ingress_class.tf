resource "kubernetes_ingress_class_v1" "nginx" {
  metadata {
    name = "nginx"
  }

  spec {
    controller = "k8s.io/ingress-nginx"
  }
}

resource "kubernetes_service_v1" "controller" {
  metadata {
    name      = "ingress-nginx-controller"
    namespace = "ingress-nginx"
  }
  spec {
    type = "NodePort"
    selector = {
      "app.kubernetes.io/name" = "ingress-nginx"
    }
    port {
      name      = "http"
      port      = 80
      node_port = 30080
    }
  }
}
