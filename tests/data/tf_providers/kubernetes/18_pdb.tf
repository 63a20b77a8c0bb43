resource "kubernetes_pod_disruption_budget_v1" "web" {
  metadata {
    name = "web"
  }

  spec {
    min_available = "50%"
    selector {
      match_labels = {
        app = "web"
      }
    }
  }
}

resource "kubernetes_service_v1" "web_headless" {
  metadata {
    name = "web-headless"
  }

  spec {
    cluster_ip = "None"
    selector = {
      app = "web"
    }
    port {
      port = 8080
    }
  }
}
