resource "kubernetes_namespace_v1" "team" {
  metadata {
    name = "team-a"
  }
}

resource "kubernetes_resource_quota_v1" "team" {
  metadata {
    name      = "quota"
    namespace = kubernetes_namespace_v1.team.metadata[0].name
  }

  spec {
    hard = {
      "requests.cpu"    = "8"
      "requests.memory" = "16Gi"
      pods              = "40"
    }
  }
}

resource "kubernetes_limit_range_v1" "team" {
  metadata {
    name      = "defaults"
    namespace = kubernetes_namespace_v1.team.metadata[0].name
  }

  spec {
    limit {
      type = "Container"
      default = {
        cpu    = "500m"
        memory = "512Mi"
      }
    }
  }
}

resource "kubernetes_role_v1" "team_viewer" {
  metadata {
    name      = "viewer"
    namespace = kubernetes_namespace_v1.team.metadata[0].name
  }

  rule {
    api_groups = [""]
    resources  = ["pods", "services"]
    verbs      = ["get", "list"]
  }
}
