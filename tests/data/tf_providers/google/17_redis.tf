resource "google_redis_instance" "cache" {
  name               = "session-cache"
  tier               = "STANDARD_HA"
  memory_size_gb     = 2
  region             = "us-central1"
  redis_version      = "REDIS_7_0"
  authorized_network = "default"

  maintenance_policy {
    weekly_maintenance_window {
      day = "SUNDAY"
      start_time {
        hours   = 2
        minutes = 0
      }
    }
  }
}
