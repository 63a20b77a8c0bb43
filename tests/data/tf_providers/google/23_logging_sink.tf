resource "google_storage_bucket" "audit" {
  name     = "acme-audit-logs"
  location = "EU"

  retention_policy {
    retention_period = 2592000
  }
}

resource "google_logging_project_sink" "audit" {
  name                   = "audit-sink"
  destination            = "storage.googleapis.com/${google_storage_bucket.audit.name}"
  filter                 = "logName:\"cloudaudit.googleapis.com\""
  unique_writer_identity = true
}
