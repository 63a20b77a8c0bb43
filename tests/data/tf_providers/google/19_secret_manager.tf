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
