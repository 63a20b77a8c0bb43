provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "fn" {
  name     = "rg-fn"
  location = "westeurope"
}

resource "azurerm_storage_account" "fn" {
  name                     = "acmefnstore"
  resource_group_name      = azurerm_resource_group.fn.name
  location                 = azurerm_resource_group.fn.location
  account_tier             = "Standard"
  account_replication_type = "LRS"
}

resource "azurerm_service_plan" "fn" {
  name                = "plan-fn"
  resource_group_name = azurerm_resource_group.fn.name
  location            = azurerm_resource_group.fn.location
  os_type             = "Linux"
  sku_name            = "Y1"
}

resource "azurerm_linux_function_app" "fn" {
  name                       = "fn-acme-jobs"
  resource_group_name        = azurerm_resource_group.fn.name
  location                   = azurerm_resource_group.fn.location
  service_plan_id            = azurerm_service_plan.fn.id
  storage_account_name       = azurerm_storage_account.fn.name
  storage_account_access_key = azurerm_storage_account.fn.primary_access_key

  site_config {
    application_stack {
      node_version = "20"
    }
  }
}
