variable "project_id" {
  type    = string
  default = "acme-dev"
}

resource "google_project_service" "apis" {
  for_each           = toset(["compute.googleapis.com", "run.googleapis.com"])
  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}

resource "google_artifact_registry_repository" "images" {
  location      = "us-central1"
  repository_id = "images"
  format        = "DOCKER"

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = 10
    }
  }

  depends_on = [google_project_service.apis]
}
