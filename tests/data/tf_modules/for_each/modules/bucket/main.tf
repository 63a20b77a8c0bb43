variable "name" {
  type = string

  validation {
    condition     = length(var.name) >= 3 && length(var.name) <= 63
    error_message = "A bucket name has 3 to 63 characters."
  }
}

variable "versioned" {
  type    = bool
  default = false
}

resource "aws_s3_bucket" "this" {
  bucket        = var.name
  force_destroy = false
}

resource "aws_s3_bucket_versioning" "this" {
  bucket = aws_s3_bucket.this.id

  versioning_configuration {
    status = var.versioned ? "Enabled" : "Suspended"
  }
}

output "id" {
  value = aws_s3_bucket.this.id
}

output "arn" {
  value = aws_s3_bucket.this.arn
}
