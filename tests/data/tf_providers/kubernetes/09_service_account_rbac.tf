resource "kubernetes_service_account_v1" "deployer" {
  metadata {
    name      = "deployer"
    namespace = "ci"
  }

  image_pull_secret {
    name = "registry"
  }
}

resource "kubernetes_role_v1" "deployer" {
  metadata {
    name      = "deployer"
    namespace = "ci"
  }

  rule {
    api_groups = ["apps"]
    resources  = ["deployments"]
    verbs      = ["get", "list", "patch"]
  }
}

resource "kubernetes_role_binding_v1" "deployer" {
  metadata {
    name      = "deployer"
    namespace = "ci"
  }

  role_ref {
    api_group = "rbac.authorization.k8s.io"
    kind      = "Role"
    name      = kubernetes_role_v1.deployer.metadata[0].name
  }

  subject {
    kind      = "ServiceAccount"
    name      = kubernetes_service_account_v1.deployer.metadata[0].name
    namespace = "ci"
  }
}
