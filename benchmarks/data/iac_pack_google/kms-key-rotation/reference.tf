resource "google_kms_key_ring" "app" {
  name     = "app-keys"
  location = "europe-west1"
}

resource "google_kms_crypto_key" "data" {
  name            = "data-key"
  key_ring        = google_kms_key_ring.app.id
  purpose         = "ENCRYPT_DECRYPT"
  rotation_period = "7776000s"
}
