resource "aws_sns_topic" "orders" {
  name = "order-events"
}

resource "aws_sqs_queue" "worker" {
  name = "order-events-worker"
}

resource "aws_sns_topic_subscription" "worker" {
  topic_arn = aws_sns_topic.orders.arn
  protocol  = "email"
  endpoint  = "ops@example.com"
}
