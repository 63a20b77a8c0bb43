resource "kubernetes_deployment_v1" "worker" {
  metadata {
    name = "worker"
    labels = {
      app = "worker"
    }
  }

  spec {
    replicas = 1

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
        security_context {
          run_as_non_root = true
          run_as_user     = 10001
        }

        container {
          name  = "worker"
          image = "ghcr.io/acme/worker:1.0.0"

          port {
            container_port = 9000
          }

          security_context {
            read_only_root_filesystem  = true
            allow_privilege_escalation = false
          }
        }
      }
    }
  }
}
