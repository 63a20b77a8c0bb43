terraform {
  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = ">= 2.30"
    }
  }
}

provider "kubernetes" {
  config_path    = "~/.kube/config"
  config_context = "staging"
}

resource "kubernetes_service_account_v1" "app" {
  metadata {
    name = "app"
    annotations = {
      "iam.gke.io/gcp-service-account" = "app@acme-dev.iam.gserviceaccount.com"
    }
  }

  image_pull_secret {
    name = "registry"
  }
}

resource "kubernetes_cluster_role_binding_v1" "app_view" {
  metadata {
    name = "app-view"
  }
  role_ref {
    api_group = "rbac.authorization.k8s.io"
    kind      = "ClusterRole"
    name      = "view"
  }
  subject {
    kind      = "ServiceAccount"
    name      = kubernetes_service_account_v1.app.metadata[0].name
    namespace = "default"
  }
}
