resource "google_secret_manager_secret" "db_password" {
  secret_id = "db-password"

  replication {
    auto {}
  }

  labels = {
    app = "billing"
  }
}

resource "google_secret_manager_secret_version" "v1" {
  secret      = google_secret_manager_secret.db_password.id
  secret_data = "not-a-real-password"
}

resource "google_secret_manager_secret_iam_member" "reader" {
  secret_id = google_secret_manager_secret.db_password.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:billing@acme-prod.iam.gserviceaccount.com"

  condition {
    title      = "billing-only"
    expression = "request.time < timestamp(\"2027-06-01T00:00:00Z\")"
  }
}
