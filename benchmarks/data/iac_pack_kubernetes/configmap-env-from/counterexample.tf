resource "kubernetes_config_map_v1" "app" {
  metadata {
    name = "app-config"
  }

  data = {
    LOG_LEVEL = "debug"
    CACHE_TTL = "300"
  }
}

resource "kubernetes_deployment_v1" "app" {
  metadata {
    name = "app"
    labels = {
      app = "app"
    }
  }

  spec {
    replicas = 1

    selector {
      match_labels = {
        app = "app"
      }
    }

    template {
      metadata {
        labels = {
          app = "app"
        }
      }

      spec {
        container {
          name  = "app"
          image = "ghcr.io/acme/app:4.2.0"

          port {
            container_port = 8080
          }

          env_from {
            config_map_ref {
              name = kubernetes_config_map_v1.app.metadata[0].name
            }
          }
        }
      }
    }
  }
}
