resource "aws_iam_role" "lambda" {
  name = "lambda-exec"

  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Action    = "sts:AssumeRole"
      Principal = { Service = "lambda.amazonaws.com" }
    }]
  })
}

resource "aws_cloudwatch_log_group" "worker" {
  name              = "/aws/lambda/worker"
  retention_in_days = 14
}

resource "aws_lambda_function" "worker" {
  function_name = "worker"
  role          = aws_iam_role.lambda.arn
  runtime       = "python3.12"
  handler       = "worker.main"
  filename      = "worker.zip"

  environment {
    variables = {
      STAGE = "prod"
    }
  }

  depends_on = [aws_cloudwatch_log_group.worker]
}
