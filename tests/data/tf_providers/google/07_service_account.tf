resource "google_service_account" "ci" {
  account_id   = "ci-runner"
  display_name = "CI runner"
}

resource "google_project_iam_member" "ci_builder" {
  project = "acme-prod"
  role    = "roles/cloudbuild.builds.builder"
  member  = "serviceAccount:${google_service_account.ci.email}"

  condition {
    title      = "expires-2027"
    expression = "request.time < timestamp(\"2027-01-01T00:00:00Z\")"
  }
}

resource "google_service_account_key" "ci" {
  service_account_id = google_service_account.ci.name
  public_key_type    = "TYPE_X509_PEM_FILE"
}
