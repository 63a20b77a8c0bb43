resource "google_storage_bucket" "artifacts" {
  name                        = "acme-artifacts"
  location                    = "EU"
  uniform_bucket_level_access = true

  versioning {
    enabled = false
  }
}
