variable "queue_name" {
  type = string
}

resource "aws_sqs_queue" "jobs" {
  name                      = var.queue_name
  message_retention_seconds = 345600
  tags = {
    owner = "jobs-team"
  }
}
