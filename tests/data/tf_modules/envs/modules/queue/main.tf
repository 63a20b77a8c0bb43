variable "name" {
  type = string
}

variable "retention" {
  type    = number
  default = 345600
}

resource "aws_sqs_queue" "this" {
  name                      = var.name
  message_retention_seconds = var.retention
}

output "url" {
  value = aws_sqs_queue.this.url
}
