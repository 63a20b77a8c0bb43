variable "name" {
  type = string
}

variable "service" {
  type = string
}

resource "aws_iam_role" "this" {
  name = var.name
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = var.service }
    }]
  })
}

output "name" {
  value = aws_iam_role.this.name
}

output "arn" {
  value = aws_iam_role.this.arn
}
