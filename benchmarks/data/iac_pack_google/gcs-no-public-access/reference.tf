resource "google_storage_bucket" "reports" {
  name                     = "acme-reports"
  location                 = "europe-west1"
  public_access_prevention = "enforced"

  lifecycle_rule {
    action {
      type = "Delete"
    }
    condition {
      age = 365
    }
  }
}
