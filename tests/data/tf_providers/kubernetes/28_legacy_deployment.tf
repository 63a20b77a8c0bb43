resource "kubernetes_deployment" "legacy" {
  metadata {
    name = "legacy-app"
  }

  spec {
    replicas = 1
    selector {
      match_labels = {
        app = "legacy"
      }
    }
    template {
      metadata {
        labels = {
          app = "legacy"
        }
      }
      spec {
        container {
          name  = "legacy"
          image = "ghcr.io/acme/legacy:7"
          env {
            name  = "MODE"
            value = "compat"
          }
        }
      }
    }
  }
}

resource "kubernetes_service" "legacy" {
  metadata {
    name = "legacy"
  }
  spec {
    selector = {
      app = "legacy"
    }
    port {
      port        = 80
      target_port = "8080"
    }
  }
}
