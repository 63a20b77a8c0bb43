resource "kubernetes_deployment_v1" "worker" {
  metadata {
    name = "worker"
  }

  spec {
    replicas = 2
    selector {
      match_labels = {
        app = "worker"
      }
    }
    template {
      metadata {
        labels = {
          app = "worker"
        }
      }
      spec {
        container {
          name  = "worker"
          image = "ghcr.io/acme/worker:5.2"

          liveness_probe {
            http_get {
              path = "/healthz"
              port = 8080
            }
            initial_delay_seconds = 10
            period_seconds        = 15
          }

          readiness_probe {
            tcp_socket {
              port = 8080
            }
          }
        }
      }
    }
  }
}
