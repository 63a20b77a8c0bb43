resource "google_storage_bucket" "src" {
  name     = "acme-fn-source"
  location = "US"

  versioning {
    enabled = true
  }
}

resource "google_storage_bucket_object" "zip" {
  name   = "function.zip"
  bucket = google_storage_bucket.src.name
  source = "function.zip"
}

resource "google_cloudfunctions_function" "hello" {
  name                  = "hello"
  runtime               = "python311"
  available_memory_mb   = 256
  source_archive_bucket = google_storage_bucket.src.name
  source_archive_object = google_storage_bucket_object.zip.name
  trigger_http          = true
  entry_point           = "handler"
}
