resource "kubernetes_priority_class_v1" "critical" {
  metadata {
    name = "critical"
  }

  value          = 100000
  global_default = false
}

resource "kubernetes_deployment_v1" "ingress" {
  metadata {
    name = "edge"
  }

  spec {
    replicas = 2
    selector {
      match_labels = {
        app = "edge"
      }
    }
    template {
      metadata {
        labels = {
          app = "edge"
        }
      }
      spec {
        priority_class_name = kubernetes_priority_class_v1.critical.metadata[0].name
        container {
          name  = "edge"
          image = "envoyproxy/envoy:v1.31.0"
          port {
            container_port = 10000
            name           = "http"
          }
        }
      }
    }
  }
}
