resource "kubernetes_config_map_v1" "nginx" {
  metadata {
    name = "nginx-conf"
  }

  data = {
    "default.conf" = "server { listen 80; location / { return 200 'ok'; } }"
  }
}

resource "kubernetes_pod_v1" "nginx" {
  metadata {
    name = "nginx"
  }

  spec {
    container {
      name  = "nginx"
      image = "nginx:1.27"
      volume_mount {
        name       = "conf"
        mount_path = "/etc/nginx/conf.d"
      }
    }

    volume {
      name = "conf"
      config_map {
        name = kubernetes_config_map_v1.nginx.metadata[0].name
      }
    }
  }
}
