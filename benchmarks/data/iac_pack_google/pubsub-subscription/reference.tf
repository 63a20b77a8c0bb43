resource "google_pubsub_topic" "orders" {
  name = "orders"
}

resource "google_pubsub_subscription" "worker" {
  name                       = "orders-worker"
  topic                      = google_pubsub_topic.orders.id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"
}
