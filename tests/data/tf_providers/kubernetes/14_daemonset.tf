resource "kubernetes_daemon_set_v1" "logs" {
  metadata {
    name      = "log-agent"
    namespace = "kube-system"
  }

  spec {
    selector {
      match_labels = {
        app = "log-agent"
      }
    }

    template {
      metadata {
        labels = {
          app = "log-agent"
        }
      }

      spec {
        toleration {
          operator = "Exists"
        }

        container {
          name  = "agent"
          image = "fluent/fluent-bit:3.1"

          volume_mount {
            name       = "varlog"
            mount_path = "/var/log"
            read_only  = true
          }
        }

        volume {
          name = "varlog"
          host_path {
            path = "/var/log"
          }
        }
      }
    }
  }
}
