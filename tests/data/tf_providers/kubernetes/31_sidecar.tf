resource "kubernetes_deployment_v1" "app" {
  metadata {
    name = "app-with-proxy"
  }

  spec {
    replicas = 2
    selector {
      match_labels = {
        app = "app-with-proxy"
      }
    }
    template {
      metadata {
        labels = {
          app = "app-with-proxy"
        }
      }
      spec {
        service_account_name = "app"
        container {
          name  = "app"
          image = "ghcr.io/acme/app:3.0"
          port {
            container_port = 8080
          }
        }
        container {
          name  = "proxy"
          image = "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.11.0"
          args  = ["--port=5432", "acme-prod:us-central1:main-pg"]
        }
      }
    }
  }
}
