resource "kubernetes_service_v1" "web" {
  metadata {
    name = "web"
  }

  spec {
    selector = {
      app = "web"
    }
    type = "ClusterIP"

    port {
      name        = "http"
      port        = 80
      target_port = "8080"
    }
  }
}
