resource "kubernetes_role_v1" "pod_reader" {
  metadata {
    name      = "pod-reader"
    namespace = "apps"
  }

  rule {
    api_groups = [""]
    resources  = ["pods"]
    verbs      = ["*"]
  }
}

resource "kubernetes_role_binding_v1" "ci_pod_reader" {
  metadata {
    name      = "ci-pod-reader"
    namespace = "apps"
  }

  role_ref {
    api_group = "rbac.authorization.k8s.io"
    kind      = "Role"
    name      = "pod-reader"
  }

  subject {
    kind      = "ServiceAccount"
    name      = "ci"
    namespace = "apps"
  }
}
