resource "kubernetes_deployment_v1" "gpu" {
  metadata {
    name = "trainer"
  }

  spec {
    replicas = 1
    selector {
      match_labels = {
        app = "trainer"
      }
    }
    template {
      metadata {
        labels = {
          app = "trainer"
        }
      }
      spec {
        node_selector = {
          "cloud.google.com/gke-accelerator" = "nvidia-l4"
        }
        toleration {
          key      = "nvidia.com/gpu"
          operator = "Exists"
          effect   = "NoSchedule"
        }
        container {
          name  = "trainer"
          image = "ghcr.io/acme/trainer:0.9"
          resources {
            limits = {
              "nvidia.com/gpu" = "1"
            }
          }
        }
      }
    }
  }
}
