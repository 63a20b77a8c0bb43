resource "kubernetes_pod_v1" "app" {
  metadata {
    name = "app"
    labels = {
      app = "app"
    }
  }

  spec {
    init_container {
      name    = "wait-db"
      image   = "busybox:1.36"
      command = ["sh", "-c", "until nc -z db 5432; do sleep 1; done"]
    }

    container {
      name  = "app"
      image = "ghcr.io/acme/app:3.0"

      security_context {
        run_as_non_root            = true
        allow_privilege_escalation = false
        capabilities {
          drop = ["ALL"]
        }
      }
    }
  }
}
