resource "kubernetes_persistent_volume_v1" "nfs" {
  metadata {
    name = "shared-nfs"
  }

  spec {
    capacity = {
      storage = "100Gi"
    }
    access_modes                     = ["ReadWriteMany"]
    persistent_volume_reclaim_policy = "Retain"

    persistent_volume_source {
      nfs {
        path   = "/exports/shared"
        server = "10.0.0.50"
      }
    }
  }
}
