resource "google_compute_disk" "data" {
  name = "data-disk"
  type = "pd-ssd"
  zone = "us-central1-a"
  size = 200

  labels = {
    env = "prod"
  }
}

resource "google_compute_resource_policy" "daily" {
  name   = "daily-snapshots"
  region = "us-central1"

  snapshot_schedule_policy {
    schedule {
      daily_schedule {
        days_in_cycle = 1
        start_time    = "04:00"
      }
    }
    retention_policy {
      max_retention_days = 14
    }
  }
}

resource "google_compute_disk_resource_policy_attachment" "attach" {
  name = google_compute_resource_policy.daily.name
  disk = google_compute_disk.data.name
  zone = "us-central1-a"
}
