resource "kubernetes_persistent_volume_claim_v1" "uploads" {
  metadata {
    name = "uploads"
  }

  spec {
    access_modes       = ["ReadWriteMany"]
    storage_class_name = "standard"
    resources {
      requests = {
        storage = "50Gi"
      }
    }
  }

  wait_until_bound = false
}

resource "kubernetes_pod_v1" "uploader" {
  metadata {
    name = "uploader"
  }

  spec {
    container {
      name  = "uploader"
      image = "ghcr.io/acme/uploader:1.0"
      volume_mount {
        name       = "uploads"
        mount_path = "/srv/uploads"
      }
    }

    volume {
      name = "uploads"
      persistent_volume_claim {
        claim_name = kubernetes_persistent_volume_claim_v1.uploads.metadata[0].name
      }
    }
  }
}
