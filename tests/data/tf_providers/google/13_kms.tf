resource "google_kms_key_ring" "ring" {
  name     = "app-ring"
  location = "global"
}

resource "google_kms_crypto_key" "key" {
  name            = "app-key"
  key_ring        = google_kms_key_ring.ring.id
  rotation_period = "7776000s"

  version_template {
    algorithm        = "GOOGLE_SYMMETRIC_ENCRYPTION"
    protection_level = "SOFTWARE"
  }
}
