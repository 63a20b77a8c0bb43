resource "google_monitoring_notification_channel" "email" {
  display_name = "On-call email"
  type         = "email"

  labels = {
    email_address = "oncall@acme.example"
  }
}

resource "google_monitoring_alert_policy" "cpu" {
  display_name          = "High CPU"
  combiner              = "OR"
  notification_channels = [google_monitoring_notification_channel.email.id]

  conditions {
    display_name = "CPU above 80%"
    condition_threshold {
      filter          = "resource.type = \"gce_instance\" AND metric.type = \"compute.googleapis.com/instance/cpu/utilization\""
      comparison      = "COMPARISON_GT"
      threshold_value = 0.8
      duration        = "300s"

      aggregations {
        alignment_period   = "60s"
        per_series_aligner = "ALIGN_MEAN"
      }
    }
  }
}
