resource "google_project_iam_custom_role" "viewer_plus" {
  role_id     = "viewerPlus"
  title       = "Viewer plus logs"
  permissions = ["logging.logEntries.list", "compute.instances.list"]
}

resource "google_project_iam_binding" "viewers" {
  project = "acme-prod"
  role    = google_project_iam_custom_role.viewer_plus.name
  members = ["group:sre@acme.example"]

  condition {
    title      = "business-hours"
    expression = "request.time.getHours(\"Europe/Paris\") < 19"
  }
}
