resource "google_cloud_scheduler_job" "nightly" {
  name      = "nightly-report"
  schedule  = "0 2 * * *"
  time_zone = "Europe/Paris"
  region    = "europe-west1"

  http_target {
    http_method = "POST"
    uri         = "https://reports.acme.example/run"

    headers = {
      Content-Type = "application/json"
    }
  }

  retry_config {
    retry_count = 3
  }
}
