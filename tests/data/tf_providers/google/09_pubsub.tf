resource "google_pubsub_topic" "events" {
  name                       = "order-events"
  message_retention_duration = "86600s"

  labels = {
    team = "orders"
  }
}

resource "google_pubsub_subscription" "worker" {
  name                 = "order-worker"
  topic                = google_pubsub_topic.events.id
  ack_deadline_seconds = 20

  retry_policy {
    minimum_backoff = "10s"
  }

  expiration_policy {
    ttl = "300000.5s"
  }
}
