resource "kubernetes_network_policy_v1" "db" {
  metadata {
    name      = "db-ingress"
    namespace = "data"
  }

  spec {
    pod_selector {
      match_labels = {
        app = "postgres"
      }
    }

    ingress {
      from {
        pod_selector {
          match_labels = {
            app = "api"
          }
        }
      }
      ports {
        port     = "5432"
        protocol = "TCP"
      }
    }

    policy_types = ["Ingress"]
  }
}
