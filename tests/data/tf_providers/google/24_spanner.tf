resource "google_spanner_instance" "main" {
  name         = "main-spanner"
  config       = "regional-us-central1"
  display_name = "Main"

  autoscaling_config {
    autoscaling_limits {
      min_processing_units = 1000
      max_processing_units = 3000
    }
    autoscaling_targets {
      high_priority_cpu_utilization_percent = 65
      storage_utilization_percent           = 90
    }
  }
}

resource "google_spanner_database" "orders" {
  instance                 = google_spanner_instance.main.name
  name                     = "orders"
  version_retention_period = "3d"
  ddl                      = ["CREATE TABLE t (id INT64) PRIMARY KEY (id)"]
  deletion_protection      = false
}
