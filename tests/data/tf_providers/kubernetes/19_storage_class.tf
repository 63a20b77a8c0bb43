resource "kubernetes_storage_class_v1" "fast" {
  metadata {
    name = "fast-ssd"
  }

  storage_provisioner    = "pd.csi.storage.gke.io"
  reclaim_policy         = "Delete"
  volume_binding_mode    = "WaitForFirstConsumer"
  allow_volume_expansion = true

  parameters = {
    type = "pd-ssd"
  }

  allowed_topologies {
    match_label_expressions {
      key    = "topology.kubernetes.io/zone"
      values = ["us-central1-a", "us-central1-b"]
    }
  }
}

resource "kubernetes_persistent_volume_claim_v1" "fast" {
  metadata {
    name = "fast-data"
  }

  spec {
    access_modes       = ["ReadWriteOnce"]
    storage_class_name = kubernetes_storage_class_v1.fast.metadata[0].name
    resources {
      requests = {
        storage = "10Gi"
      }
    }
  }
}
