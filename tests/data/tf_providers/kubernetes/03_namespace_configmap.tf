resource "kubernetes_namespace_v1" "apps" {
  metadata {
    name = "apps"
    labels = {
      team = "platform"
    }
  }
}

resource "kubernetes_config_map_v1" "settings" {
  metadata {
    name      = "settings"
    namespace = kubernetes_namespace_v1.apps.metadata[0].name
  }

  data = {
    LOG_LEVEL = "info"
    FEATURE_X = "on"
  }
}

resource "kubernetes_pod_v1" "probe" {
  metadata {
    name      = "probe"
    namespace = kubernetes_namespace_v1.apps.metadata[0].name
  }

  spec {
    container {
      name    = "probe"
      image   = "busybox:1.36"
      command = ["sh", "-c", "env && sleep 3600"]

      env_from {
        config_map_ref {
          name = kubernetes_config_map_v1.settings.metadata[0].name
        }
      }
    }
  }
}
