resource "kubernetes_secret_v1" "db" {
  metadata {
    name = "db-credentials"
  }

  data = {
    username = "app"
    password = "not-a-real-password"
  }

  type = "Opaque"
}

resource "kubernetes_deployment_v1" "api" {
  metadata {
    name = "api"
  }

  spec {
    replicas = 2
    selector {
      match_labels = {
        app = "api"
      }
    }
    template {
      metadata {
        labels = {
          app = "api"
        }
      }
      spec {
        container {
          name  = "api"
          image = "ghcr.io/acme/api:2.3.1"

          env {
            name = "DB_PASSWORD"
            value_from {
              secret_key_ref {
                name = kubernetes_secret_v1.db.metadata[0].name
                key  = "password"
              }
            }
          }
        }
      }
    }
  }
}
