resource "kubernetes_ingress_v1" "web" {
  metadata {
    name = "web"
    annotations = {
      "cert-manager.io/cluster-issuer" = "letsencrypt"
    }
  }

  spec {
    ingress_class_name = "nginx"

    rule {
      host = "app.acme.example"
      http {
        path {
          path      = "/"
          path_type = "Prefix"
          backend {
            service {
              name = "web"
              port {
                number = 80
              }
            }
          }
        }
      }
    }

    tls {
      hosts       = ["app.acme.example"]
      secret_name = "web-tls"
    }
  }
}
