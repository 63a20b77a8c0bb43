locals {
  teams = ["payments", "search", "growth"]
}

resource "kubernetes_namespace_v1" "team" {
  for_each = toset(local.teams)
  metadata {
    name = each.key
    labels = {
      team = each.key
    }
  }

  timeouts {
    delete = "10m"
  }
}

resource "kubernetes_role_binding_v1" "admins" {
  for_each = toset(local.teams)
  metadata {
    name      = "team-admins"
    namespace = kubernetes_namespace_v1.team[each.key].metadata[0].name
  }
  role_ref {
    api_group = "rbac.authorization.k8s.io"
    kind      = "ClusterRole"
    name      = "admin"
  }
  subject {
    kind      = "Group"
    name      = "${each.key}-admins"
    api_group = "rbac.authorization.k8s.io"
  }
}
