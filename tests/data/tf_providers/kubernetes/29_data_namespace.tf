data "kubernetes_namespace_v1" "existing" {
  metadata {
    name = "shared"
  }
}

resource "kubernetes_secret_v1" "tls" {
  metadata {
    name      = "tls-cert"
    namespace = data.kubernetes_namespace_v1.existing.metadata[0].name
  }

  type = "kubernetes.io/tls"
  data = {
    "tls.crt" = "not-a-real-certificate"
    "tls.key" = "not-a-real-key"
  }
}

resource "kubernetes_pod_v1" "tls_check" {
  metadata {
    name      = "tls-check"
    namespace = data.kubernetes_namespace_v1.existing.metadata[0].name
  }
  spec {
    container {
      name  = "check"
      image = "alpine:3.20"
      args  = ["sleep", "60"]
    }
  }
}
