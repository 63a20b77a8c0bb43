variable "replicas" {
  type    = number
  default = 2
}

variable "image_tag" {
  type    = string
  default = "1.4.0"
}

resource "kubernetes_deployment_v1" "frontend" {
  metadata {
    name = "frontend"
  }

  spec {
    replicas = var.replicas
    selector {
      match_labels = {
        app = "frontend"
      }
    }
    template {
      metadata {
        labels = {
          app = "frontend"
        }
      }
      spec {
        container {
          name  = "frontend"
          image = "ghcr.io/acme/frontend:${var.image_tag}"
          port {
            container_port = 3000
          }
        }
      }
    }
  }
}

output "frontend_name" {
  value = kubernetes_deployment_v1.frontend.metadata[0].name
}
